import{b as t}from"./index-ErilaTZ1.js";function n(){return t("p",{class:"lead",children:"Not built yet."})}export{n as OwnTokens};
