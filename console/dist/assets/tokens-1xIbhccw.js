import{b as t}from"./index-CbxLBTTX.js";function n(){return t("p",{class:"lead",children:"Not built yet."})}export{n as OwnTokens};
