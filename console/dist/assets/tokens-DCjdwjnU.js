import{u as t}from"./index-DUY1ribH.js";function n(){return t("p",{class:"lead",children:"Not built yet."})}export{n as OwnTokens};
